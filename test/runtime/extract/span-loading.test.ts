import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { ModelSession } from "../../../runtime/engine/session.js";
import { TextTokenizer } from "../../../runtime/engine/tokenizer.js";
import { loadSpanExtractor } from "../../../runtime/extract/span-extractor.js";
import { loadModel } from "../../../runtime/model/load-model.js";
import { readModelFolder } from "../../../runtime/model/model-folder.js";
import { fixtureFolder } from "../support/runtime-server.js";

const OPTIONS = { maxTokens: 512, contextLength: 512, padId: 0 };
const temp: string[] = [];
afterAll(async () => {
  await Promise.all(temp.map((dir) => rm(dir, { recursive: true, force: true })));
});

async function copyOfGliner(): Promise<string> {
  const folder = await mkdtemp(join(tmpdir(), "tiny-gliner-"));
  temp.push(folder);
  await cp(await fixtureFolder("tiny-gliner"), folder, { recursive: true });
  return folder;
}

/** Loads `folder` as a span model, releasing the session whatever happens. */
async function load(folder: string, tokenizerFolder = folder): Promise<void> {
  const files = await readModelFolder(folder);
  const tokenizerFiles = await readModelFolder(tokenizerFolder);
  const session = await ModelSession.open(files.onnxPath, { intraOpThreads: 1 });
  try {
    const tokenizer = new TextTokenizer(
      tokenizerFiles.tokenizerJson,
      tokenizerFiles.tokenizerConfig,
    );
    await loadSpanExtractor(session, tokenizer, folder, OPTIONS);
  } finally {
    await session.release();
  }
}

describe("a span model folder that cannot be served fails at load with the reason", () => {
  it("loads tiny-gliner", async () => {
    await expect(load(await fixtureFolder("tiny-gliner"))).resolves.toBeUndefined();
  });

  it("names the span-mode inputs a graph lacks", async () => {
    await expect(load(await fixtureFolder("tiny-nli"))).rejects.toThrow(
      /needs inputs .*; missing words_mask, text_lengths, span_idx, span_mask$/,
    );
  });

  it("needs gliner_config.json", async () => {
    const folder = await copyOfGliner();
    await rm(join(folder, "gliner_config.json"));
    await expect(load(folder)).rejects.toThrow(/a span model needs gliner_config\.json/);
  });

  it("checks max_width and max_len, and the word splitter", async () => {
    const folder = await copyOfGliner();
    const write = (config: object) =>
      writeFile(join(folder, "gliner_config.json"), JSON.stringify(config));
    await write({ max_width: 0, max_len: 24 });
    await expect(load(folder)).rejects.toThrow(/max_width must be a positive integer; got 0/);
    await write({ max_width: 4 });
    await expect(load(folder)).rejects.toThrow(/max_len must be a positive integer; got undefined/);
    await write({ max_width: 4, max_len: 24, words_splitter_type: "spacy" });
    await expect(load(folder)).rejects.toThrow(/words_splitter_type "spacy" is not supported/);
    await write({ max_width: 4, max_len: 24, ent_token: "<<E>>" });
    await expect(load(folder)).rejects.toThrow(/the tokenizer has no '<<E>>' token/);
  });

  it("needs a tokenizer that knows the prompt markers", async () => {
    const folder = await copyOfGliner();
    await expect(load(folder, await fixtureFolder("tiny-nli"))).rejects.toThrow(
      /the tokenizer has no '<<ENT>>' token/,
    );
  });
});

describe("the runtime reads a span model from its files", () => {
  it("serves a folder with gliner_config.json as span entity extraction", async () => {
    const model = await loadModel({
      path: await fixtureFolder("tiny-gliner"),
      overflow: "error",
      threads: 1,
    });
    try {
      expect(model.task).toBe("entity-extraction");
      if (model.task === "entity-extraction") expect(model.extractor.method).toBe("span");
    } finally {
      await model.session.release();
    }
  });

  it("takes the encoder's config from gliner_config.json when there is no config.json", async () => {
    const folder = await copyOfGliner();
    await rm(join(folder, "config.json"));
    const glinerConfig = JSON.parse(
      await readFile(join(folder, "gliner_config.json"), "utf8"),
    ) as Record<string, unknown>;
    const encoder = { max_position_embeddings: 64, pad_token_id: 0 };
    await writeFile(
      join(folder, "gliner_config.json"),
      JSON.stringify({ ...glinerConfig, encoder_config: encoder }),
    );
    const model = await loadModel({ path: folder, overflow: "error", threads: 1 });
    try {
      if (model.task !== "entity-extraction") throw new Error(`served as ${model.task}`);
      // 64 positions, not the tokenizer's 512: a 50-token label leaves the text too little room.
      const long = "x ".repeat(50).trim();
      expect(() => model.extractor.prepare("Alice", { labels: [long], threshold: 0.5 })).toThrow(
        expect.objectContaining({ param: "metadata.labels" }),
      );
      const [entities] = await model.extractor.runBatch([
        model.extractor.prepare("Alice", { labels: ["person"], threshold: 0.5 }),
      ]);
      expect(entities?.map(({ label, start, end }) => [label, start, end])).toEqual([
        ["person", 0, 5],
      ]);
    } finally {
      await model.session.release();
    }
  });
});
