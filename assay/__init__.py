"""assay: the agent proposes; the assay decides.

The rooms of the house live in top-level folders of the repository (agents/, tools/, ...)
and are mapped by pyproject.toml into this one import package (assay.agents, assay.tools, ...).
"""

__version__ = "0.1.0"
