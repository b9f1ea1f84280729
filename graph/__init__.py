"""Floor 2: the RCA agent. State, nodes, edges, tools, the trace and action-claim guards, the
rubric grader.

May import `gates`; never `bot`. Configuration arrives as typed objects (`graph.config`).
"""
