"""The launch gates: each launcher's policy contract read into a tool-neutral launch request,
and the governor's answer written back as the launcher expects it (`skypilot`, `dstack`)."""
