"""Build the tiny model the real-vLLM tests serve: `python tiny_model.py OUT_DIR` (in the real venv).

No model can be downloaded on these machines, so the model is made here, deterministically: a
Llama architecture (vLLM's best-trodden path) of 2 layers and ~0.4 M random bf16 weights, and a
byte-level BPE tokenizer trained on generated sentences, with a ChatML-like chat template so that
`/v1/chat/completions` works. Its answers are gibberish; the tests send `ignore_eos` so every request
yields exactly `max_tokens` tokens. Run by scripts/ensure-real-vllm, which keeps the result cached.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

EOS = "<|im_end|>"
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", EOS]
VOCAB_SIZE = 2048
# ChatML, as many chat models use: every message framed by im_start/im_end, then the assistant cue.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)
_WORDS = (
    "the a prefill decode cache key value token model engine transfer node replica request answer "
    "prompt fast slow moves reads writes builds serves sends gets on over through with from to and "
    "of in GPU CPU network memory block layer head batch queue stream first next every one two three"
).split()


def _sentences(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 16))).capitalize() + "."
        for _ in range(count)
    ]


def build_tokenizer(out: Path) -> int:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte encodes: no unknown token
    )
    tokenizer.train_from_iterator(_sentences(4000, seed=15), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        bos_token="<|endoftext|>",
        eos_token=EOS,
        pad_token="<|endoftext|>",
        unk_token=None,
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(str(out))
    return len(fast)


def build_model(out: Path, vocab_size: int, eos_id: int, bos_id: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(15)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        pad_token_id=bos_id,
        tie_word_embeddings=True,
        torch_dtype="bfloat16",
    )
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(str(out), safe_serialization=True)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python tiny_model.py OUT_DIR", file=sys.stderr)
        return 2
    out = Path(argv[0])
    out.mkdir(parents=True, exist_ok=True)
    vocab_size = build_tokenizer(out)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(out))
    build_model(out, vocab_size, tokenizer.convert_tokens_to_ids(EOS), tokenizer.convert_tokens_to_ids("<|endoftext|>"))
    print(f"tiny model: vocabulary {vocab_size}, written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
