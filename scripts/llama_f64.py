"""transformers' Llama kept in float64: import this module and call `patch()`.

Llama casts to float32 in three places, which would leave float64 only in name: RMSNorm's
`hidden_states.to(torch.float32)`, the rotary embedding's float32 inverse frequencies and
angles, and the eager attention's `softmax(..., dtype=torch.float32)`. `patch()` replaces those
three functions by the same formulas kept in float64 (the math is the code's, line for line).
The eager attention must be selected (attn_implementation="eager") for the third to apply.
Used by scripts/decoder_goldens.py and scripts/smollm_goldens.py.
"""
import torch
import torch.nn.functional as F
from transformers.models.llama import modeling_llama


def rms_norm_f64(self, hidden_states):
    variance = hidden_states.pow(2).mean(-1, keepdim=True)
    return self.weight * (hidden_states * torch.rsqrt(variance + self.variance_epsilon))


def rotary_f64(self, x, position_ids):
    base = self.config.rope_parameters["rope_theta"]
    dim = self.config.head_dim
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim))
    freqs = position_ids[..., None].to(torch.float64) * inv_freq
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


def eager_attention_f64(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    key_states = modeling_llama.repeat_kv(key, module.num_key_value_groups)
    value_states = modeling_llama.repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = F.softmax(attn_weights, dim=-1)
    attn_output = torch.matmul(attn_weights, value_states).transpose(1, 2).contiguous()
    return attn_output, attn_weights


def patch():
    """Replaces the three float32 casts of transformers' Llama (for every model made after)."""
    modeling_llama.LlamaRMSNorm.forward = rms_norm_f64
    modeling_llama.LlamaRotaryEmbedding.forward = rotary_f64
    modeling_llama.eager_attention_forward = eager_attention_f64


def unpatch():
    """Puts transformers' own three functions back."""
    modeling_llama.LlamaRMSNorm.forward = _ORIGINAL[0]
    modeling_llama.LlamaRotaryEmbedding.forward = _ORIGINAL[1]
    modeling_llama.eager_attention_forward = _ORIGINAL[2]


_ORIGINAL = (modeling_llama.LlamaRMSNorm.forward, modeling_llama.LlamaRotaryEmbedding.forward,
             modeling_llama.eager_attention_forward)
