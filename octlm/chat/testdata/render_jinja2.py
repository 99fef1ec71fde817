# Mirrors transformers' chat_template_utils._compile_jinja_template + render (dev only).
import json, sys
import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment
def raise_exception(message): raise jinja2.exceptions.TemplateError(message)
def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)
env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
env.filters["tojson"] = tojson
env.globals["raise_exception"] = raise_exception
cfg = json.load(open(sys.argv[1]))
t = env.from_string(cfg['chat_template'])
for line in sys.stdin.read().split('\n'):
    if not line.strip(): continue
    c = json.loads(line)
    c.pop('name', None); messages = c.pop('messages'); tools = c.pop('tools', None); agp = c.pop('add_generation_prompt', False)
    try:
        out = t.render(messages=messages, tools=tools, documents=None, add_generation_prompt=agp,
                       eos_token='<|im_end|>', pad_token='<|endoftext|>', **c)
        print(json.dumps(out))
    except Exception as e:
        print(json.dumps({"error": type(e).__name__ + ": " + str(e)}))
