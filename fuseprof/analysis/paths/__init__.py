"""The dependency graph of each step and its replays: the critical path, the job path across ranks, what-if plans and the step time a change saves. Reads the facts."""
