"""The control tokens of the common chat templates, as data: what :func:`anaphora.sanitize.sanitize` removes.

One entry per template family, each token written as the template writes it. The sanitizer matches them
tolerantly (any case, spaces inside the brackets, full-width look-alikes, ``▁`` for ``_``), and also removes the
shapes below, which catch tokens of templates not listed here.
"""

from __future__ import annotations

SPECIAL_TOKENS: dict[str, tuple[str, ...]] = {
    "chatml": ("<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|endoftext|>"),
    "llama2": ("[INST]", "[/INST]", "<<SYS>>", "<</SYS>>", "<s>", "</s>"),
    "llama3": (
        "<|begin_of_text|>",
        "<|end_of_text|>",
        "<|start_header_id|>",
        "<|end_header_id|>",
        "<|eot_id|>",
        "<|eom_id|>",
        "<|python_tag|>",
    ),
    "mistral_v3": (
        "[INST]",
        "[/INST]",
        "[TOOL_CALLS]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
    ),
    "mistral_v7": (
        "[SYSTEM_PROMPT]",
        "[/SYSTEM_PROMPT]",
        "[TOOL_CONTENT]",
        "[TOOL_CALLS]",
        "[AVAILABLE_TOOLS]",
        "[/AVAILABLE_TOOLS]",
        "[TOOL_RESULTS]",
        "[/TOOL_RESULTS]",
        "[THINK]",
        "[/THINK]",
    ),
    "gemma": ("<start_of_turn>", "<end_of_turn>", "<bos>", "<eos>", "<pad>"),
    "phi3": ("<|system|>", "<|user|>", "<|assistant|>", "<|end|>", "<|endoftext|>"),
    "deepseek": (
        "<｜begin▁of▁sentence｜>",
        "<｜end▁of▁sentence｜>",
        "<｜User｜>",
        "<｜Assistant｜>",
        "<｜tool▁calls▁begin｜>",
        "<｜tool▁calls▁end｜>",
        "<｜tool▁call▁begin｜>",
        "<｜tool▁call▁end｜>",
        "<｜tool▁sep｜>",
        "<｜tool▁outputs▁begin｜>",
        "<｜tool▁outputs▁end｜>",
        "<｜tool▁output▁begin｜>",
        "<｜tool▁output▁end｜>",
        "<think>",
        "</think>",
    ),
    "command_r": (
        "<BOS_TOKEN>",
        "<EOS_TOKEN>",
        "<|START_OF_TURN_TOKEN|>",
        "<|END_OF_TURN_TOKEN|>",
        "<|SYSTEM_TOKEN|>",
        "<|USER_TOKEN|>",
        "<|CHATBOT_TOKEN|>",
        "<|START_RESPONSE|>",
        "<|END_RESPONSE|>",
        "<|START_THINKING|>",
        "<|END_THINKING|>",
    ),
    # SmolLM2 (the embedded default) and StarCoder: control tokens of their vocabulary besides ChatML's
    "smollm2_starcoder": (
        "<repo_name>",
        "<reponame>",
        "<file_sep>",
        "<filename>",
        "<gh_stars>",
        "<issue_start>",
        "<issue_comment>",
        "<issue_closed>",
        "<jupyter_start>",
        "<jupyter_text>",
        "<jupyter_code>",
        "<jupyter_output>",
        "<jupyter_script>",
        "<empty_output>",
    ),
    "qwen_tools": (
        "<tools>",
        "</tools>",
        "<tool_call>",
        "</tool_call>",
        "<tool_response>",
        "</tool_response>",
        "<think>",
        "</think>",
    ),
}

# Role names that templates (and prompt-injection payloads) write as tags: <system>, </assistant>, <|user>
ROLE_NAMES = ("system", "user", "assistant", "human", "ai", "bot", "model", "tool", "function", "ipython", "developer")


def all_tokens() -> list[str]:
    """Every listed token once, longest first (so a regex alternation prefers ``</s>`` over ``<s>``)."""
    return sorted({t for tokens in SPECIAL_TOKENS.values() for t in tokens}, key=lambda t: (-len(t), t))
