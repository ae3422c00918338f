#!/usr/bin/env python3
"""A random-weight tiny Llama in Hugging Face format for vLLM-CPU (no download from a hub).

Same shape as make_tiny_gguf.py (29 M parameters: 8 layers, d=512, 8 heads, ff 1536,
vocab 2048) with a byte-level BPE tokenizer without merges, so any text is one token per
byte. The weights are rigged so that only the 26 lowercase ASCII letters can win the
argmax: no EOS (outputs run to max_tokens), no partial-UTF-8 empty chunks, and an answer
tokenizes back to exactly the tokens generated (a conversation's next turn resends it).

    python make_tiny_hf.py OUT_DIR
"""
import sys

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from tokenizers.pre_tokenizers import ByteLevel
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

VOCAB = 2048


def tokenizer() -> PreTrainedTokenizerFast:
    vocab = {"<s>": 0, "</s>": 1}
    for ch in sorted(ByteLevel.alphabet()):  # 256 printable stand-ins for the bytes
        vocab[ch] = len(vocab)
    i = 0
    while len(vocab) < VOCAB:
        vocab[f"tok{i}"] = len(vocab)
        i += 1
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.chat_template = "{% for message in messages %}{{ message['content'] }}{% endfor %}"
    return fast


def letters() -> list:
    """The vocabulary ids of a..z (the byte-level alphabet maps printable ASCII to itself)."""
    alphabet = sorted(ByteLevel.alphabet())
    return [2 + alphabet.index(c) for c in "abcdefghijklmnopqrstuvwxyz"]


def model() -> LlamaForCausalLM:
    cfg = LlamaConfig(
        vocab_size=VOCAB, hidden_size=512, intermediate_size=1536, num_hidden_layers=8,
        num_attention_heads=8, num_key_value_heads=8, max_position_embeddings=8192,
        bos_token_id=0, eos_token_id=1, torch_dtype="bfloat16", tie_word_embeddings=False,
    )
    torch.manual_seed(0)
    m = LlamaForCausalLM(cfg)
    # A constant residual channel (dim 0) that no layer writes gives every token but the
    # letters a large negative logit, so generation only ever picks a..z.
    with torch.no_grad():
        m.model.embed_tokens.weight[:, 0] = 10.0
        for layer in m.model.layers:
            layer.self_attn.o_proj.weight[0, :] = 0.0
            layer.mlp.down_proj.weight[0, :] = 0.0
        m.lm_head.weight[:, 0] = -10.0
        m.lm_head.weight[letters(), 0] = 0.0
    return m.to(torch.bfloat16)


if __name__ == "__main__":
    out = sys.argv[1]
    m = model()
    m.save_pretrained(out, safe_serialization=True)
    tokenizer().save_pretrained(out)
    print("saved", out, round(sum(p.numel() for p in m.parameters()) / 1e6, 1), "M params")
