"""A ChatML chat template with system/user/assistant/tool roles and the `<tool_call>` convention.

Used by the tiny test tokenizer, and as the fallback for models whose own template ignores `tools`
(SmolLM2's template is plain ChatML): the engine must still show the model which tools exist and how
earlier calls and their results looked.

Conventions (the same ones Qwen-family models are trained on, so outputs parse the same way):
- tools are listed as JSON lines between `<tools>` and `</tools>` in the system turn;
- an assistant tool call is `<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`;
- tool results go back in a user turn, each wrapped in `<tool_response>` ... `</tool_response>`,
  consecutive tool messages sharing one turn.
"""

CHATML_TOOLS_TEMPLATE = (
    "{%- set sys = namespace(text='') -%}"
    "{%- if messages and messages[0]['role'] in ['system', 'developer'] -%}"
    "{%- set sys.text = messages[0]['content'] -%}"
    "{%- set rest = messages[1:] -%}"
    "{%- else -%}"
    "{%- set rest = messages -%}"
    "{%- endif -%}"
    "{%- if tools -%}"
    "{{- '<|im_start|>system\\n' -}}"
    "{%- if sys.text -%}{{- sys.text + '\\n\\n' -}}{%- endif -%}"
    "{{- '# Tools\\n\\nYou can call these functions. Their signatures, one JSON object per line:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nTo call a function, answer with a JSON object holding its name and arguments, "
    "wrapped in tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <arguments-object>}\\n</tool_call>"
    "<|im_end|>\\n' -}}"
    "{%- elif sys.text -%}"
    "{{- '<|im_start|>system\\n' + sys.text + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- for message in rest -%}"
    "{%- if message['role'] == 'tool' -%}"
    "{%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' -}}"
    "{%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' -%}{{- '<|im_end|>\\n' -}}{%- endif -%}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if message['content'] -%}{{- message['content'] -}}{%- endif -%}"
    "{%- for call in message.get('tool_calls') or [] -%}"
    "{%- set fn = call['function'] if call['function'] is defined else call -%}"
    "{%- if message['content'] or not loop.first -%}{{- '\\n' -}}{%- endif -%}"
    "{{- '<tool_call>\\n{\"name\": \"' + fn['name'] + '\", \"arguments\": ' -}}"
    "{%- if fn['arguments'] is string -%}{{- fn['arguments'] -}}{%- else -%}{{- fn['arguments'] | tojson -}}{%- endif -%}"
    "{{- '}\\n</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def template_renders_tools(template: str | None) -> bool:
    """True when a chat template refers to the `tools` variable (so passing tools changes the prompt)."""
    return bool(template) and "tools" in template


def render_prompt_ids(tokenizer, messages: list[dict], tools: list[dict] | None = None,
                      template_kwargs: dict | None = None, add_generation_prompt: bool = True) -> list[int]:
    """The token ids of a conversation as the engine renders it (template-ready messages: see
    `slime.engine.chat_parsing.normalize_messages`). Models whose own template ignores `tools` get the ChatML
    template above. Raises ValueError when the template cannot render the conversation."""
    return tokenizer.encode(render_text(tokenizer, messages, tools, template_kwargs, add_generation_prompt),
                            add_special_tokens=False)


def render_text(tokenizer, messages: list[dict], tools: list[dict] | None = None, template_kwargs: dict | None = None,
                add_generation_prompt: bool = True) -> str:
    kwargs = dict(template_kwargs or {})
    if tools and not template_renders_tools(tokenizer.chat_template):
        # the model's own template would drop the tools silently; ChatML models get ours instead
        if "<|im_start|>" not in (tokenizer.chat_template or ""):
            raise ValueError("this model's chat template cannot render tools")
        kwargs["chat_template"] = CHATML_TOOLS_TEMPLATE
    try:
        return tokenizer.apply_chat_template(messages, tools=tools or None, add_generation_prompt=add_generation_prompt,
                                             tokenize=False, **kwargs)
    except Exception as exc:  # jinja raises for conversations the template forbids
        raise ValueError(f"chat template rejected the messages: {exc}") from None
