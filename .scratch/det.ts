import { createLlama } from "../workers/engines/embedded/createLlama.ts";
import { EmbeddedEngine } from "../workers/engines/embedded/embeddedEngine.ts";
import { collectChat, userChat } from "../test/support/engines/engineTestKit.ts";
const llama = await createLlama({ gpu: false });
const prompts = ["Tell me about Mr. Darcy.", "Who is Emma?", "Describe a ball at Netherfield.", "What did Elizabeth say?"];
for (const temperature of [0, 0.9]) {
  const req = (i: number) => userChat(prompts[i % 4]!, { temperature, seed: 100 + i, maxTokens: 60 });
  const fresh = await EmbeddedEngine.load({ modelPath: "models/austen-1m.gguf", threads: 1, contextSize: 256, maxConcurrency: 1 }, { llama });
  const ref = [];
  for (let i = 0; i < 16; i++) { await (fresh as any); ref.push((await collectChat(fresh, req(i))).text); }
  await fresh.close();
  const engine = await EmbeddedEngine.load({ modelPath: "models/austen-1m.gguf", threads: 1, contextSize: 256, maxConcurrency: 16 }, { llama });
  let aloneMis = 0, togetherMis = 0;
  for (let round = 0; round < 3; round++) {
    for (let i = 0; i < 16; i++) if ((await collectChat(engine, req(i))).text !== ref[i]) aloneMis++;
    const t = await Promise.all(Array.from({ length: 16 }, (_, i) => collectChat(engine, req(i))));
    t.forEach((o, i) => { if (o.text !== ref[i]) togetherMis++; });
  }
  console.log({ temperature, aloneMis, togetherMis, of: 48 });
  await engine.close();
}
