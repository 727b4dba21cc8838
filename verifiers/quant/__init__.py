"""The quant kind's verifier: a recipe applied by the verifier itself, judged on drift against
the fp32 model and on the objective it claims to serve (size, latency)."""
