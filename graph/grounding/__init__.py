"""The grounding check: every fact-identifier a draft states (a pod, a version, a revision,
a time ...) is in the evidence the turn saw, or confirmed at its source."""
