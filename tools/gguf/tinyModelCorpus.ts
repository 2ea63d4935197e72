/**
 * The small fixed text the tiny test model's BPE vocabulary is learned from. The greedy reply
 * sentence is repeated so each of its words becomes a single token.
 */
export const TINY_REPLY_WORDS = ["Hello", "!", " I", " am", " a", " tiny", " test", " model", "."] as const;

const REPLY = TINY_REPLY_WORDS.join("");

const PROSE = `The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks were striking thirteen.
Call me Ishmael. Some years ago, never mind how long precisely, having little or no money in my purse, I thought I would sail about a little.
It is a truth universally acknowledged, that a single man in possession of a good fortune, must be in want of a wife.
All happy families are alike; each unhappy family is unhappy in its own way.
Once upon a time there was a small model that liked to write short sentences and then stop.
What is the answer? The answer is 42, and the question is about life, the universe and everything.
Please reply in JSON: {"name": "Ada", "age": 36, "tags": ["math", "code"], "ok": true, "value": null}
The weather today is sunny with a light wind from the west; tomorrow it may rain in the morning.
We can count: one, two, three, four, five, six, seven, eight, nine, ten. Numbers like 3.14 and 2024 appear too.
She said: "I don't think so," and he replied, "You're right, we'll see what they've done."
Tools are called with arguments such as {"city": "Paris", "unit": "celsius"} and return results.
`;

export function tinyModelCorpus(): string[] {
  const lines = PROSE.split("\n");
  for (let i = 0; i < 12; i += 1) lines.push(`${REPLY}\n${REPLY} ${REPLY}`);
  return lines;
}
