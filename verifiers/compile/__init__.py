"""The compile kind's verifier: does a rewritten model compile whole, without recompiles, with
its ops inside compiled graphs, computing what the task's Model computes, at least as fast?"""
