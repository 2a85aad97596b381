"""The labels a launch carries: the budget it is governed under, and the launch a gate accepted."""

BUDGET_LABEL = "governor-budget"
LAUNCH_LABEL = "governor-launch"
