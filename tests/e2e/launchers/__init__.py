"""Scripts run by the launchers' own interpreters (SkyPilot, dstack), each in a virtualenv of
its own: they call the governor's gates with the tools' real policy client code."""
