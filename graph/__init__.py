"""Floor 2: the RCA agent. State, nodes, edges, tools, the trace guard.

May import `gates`; never `bot`. Configuration arrives as typed objects (`graph.config`).
"""
