"""A small Llama-style decoder (random weights, torch only) for whole-model traces.

Written the way Hugging Face's Llama is, kernel for kernel in eager mode (an RMSNorm of eight
elementwise kernels, rotary embedding with ``rotate_half``), with a static KV cache so that
torch.compile(dynamic=False) compiles one prefill and one decode graph.
"""
