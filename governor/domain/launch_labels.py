"""The label keys that tie a launched pod to its budget and to the launch that reserved it."""

BUDGET_LABEL = "governor-budget"
LAUNCH_LABEL = "governor-launch"
