"""assay.agents: LangGraph workflows per job kind, brains, prompts.

Checkpoints hold only plain data: LangGraph reads LANGGRAPH_STRICT_MSGPACK when it is first
imported, so it is set here, before anything in this room imports langgraph.
"""

import os

os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")
