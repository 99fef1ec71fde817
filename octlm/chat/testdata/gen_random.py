import json, random
random.seed(7)
atoms = ["\n", "\n\n", " ", "<think>", "</think>", "<tool_response>", "</tool_response>", "a", "b", "é", "\u2028", "\t", "x y"]
def text():
    return "".join(random.choice(atoms) for _ in range(random.randint(0, 6)))
def jval(d=0):
    r = random.random()
    if d > 2 or r < 0.4:
        return random.choice([None, True, False, 0, -3, 1.5, 1e-7, 2.0, 1e20, 123456789012345678901, text(), "k\"\\"])
    if r < 0.7:
        return [jval(d+1) for _ in range(random.randint(0, 3))]
    return {random.choice(["a","b","2","1","name","é"]): jval(d+1) for _ in range(random.randint(0, 3))}
def content():
    return None if random.random() < 0.08 else text()
def msg(i):
    role = random.choice(["system", "user", "user", "assistant", "assistant", "tool", "tool"])
    m = {"role": role, "content": content()}
    if role == "user" and random.random() < 0.3:
        m["content"] = "<tool_response>" + text() + "</tool_response>"
    if i == 0 and role == "system" and m["content"] is None:
        m["content"] = ""
    if role == "assistant":
        r = random.random()
        if r < 0.2: m["reasoning_content"] = text()
        elif r < 0.25: m["reasoning_content"] = None
        if random.random() < 0.35:
            calls = []
            for _ in range(random.randint(0, 3)):
                args = random.choice([text(), jval(), {"p": text()}])
                c = {"name": random.choice(["f", "g_h"]), "arguments": args}
                if random.random() < 0.5: c = {"type": "function", "function": c, "id": "x"}
                calls.append(c)
            m["tool_calls"] = calls
    return m
with open("random.jsonl", "w") as f:
    for _ in range(400):
        n = random.randint(1, 7)
        c = {"messages": [msg(i) for i in range(n)]}
        if random.random() < 0.3:
            c["tools"] = [jval() for _ in range(random.randint(0, 2))]
        c["add_generation_prompt"] = random.random() < 0.6
        r = random.random()
        if r < 0.3: c["enable_thinking"] = False
        elif r < 0.45: c["enable_thinking"] = True
        f.write(json.dumps(c, ensure_ascii=False) + "\n")
