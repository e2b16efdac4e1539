import { ModelSession } from "../../../runtime/engine/session.js";
import { TextTokenizer } from "../../../runtime/engine/tokenizer.js";
import { loadSpanExtractor, type SpanExtractor } from "../../../runtime/extract/span-extractor.js";
import { readModelFolder } from "../../../runtime/model/model-folder.js";
import { fixtureFolder } from "../support/runtime-server.js";

/** tiny-gliner loaded the way the runtime loads a span model, with a session to release. */
export async function openTinyGliner(
  options: { maxTokens?: number } = {},
): Promise<{ extractor: SpanExtractor; session: ModelSession; folder: string }> {
  const folder = await fixtureFolder("tiny-gliner");
  const files = await readModelFolder(folder);
  const session = await ModelSession.open(files.onnxPath, { intraOpThreads: 1 });
  const tokenizer = new TextTokenizer(files.tokenizerJson, files.tokenizerConfig);
  const extractor = await loadSpanExtractor(session, tokenizer, folder, {
    maxTokens: options.maxTokens ?? 4096,
    contextLength: 512,
    padId: 0,
  });
  return { extractor, session, folder };
}
