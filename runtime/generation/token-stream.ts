/**
 * Incremental detokenisation for streaming: turns output tokens, one at a
 * time, into the new text each adds. A token may be part of a character
 * (byte-level BPE splits multi-byte UTF-8 over several tokens, and the
 * decoder shows an unfinished one as U+FFFD) or change how the text before
 * it decodes (SentencePiece's leading space). So each new token is decoded
 * together with a few tokens before it, and text is released only when it
 * ends in a whole character; what is held back comes with a later token.
 * The window restarts after each release, so the cost per token stays small
 * whatever the length of the output.
 */
const REPLACEMENT = "\uFFFD";

type Decode = (ids: readonly number[]) => string;

/**
 * `decode`, with the text of each token decoded alone kept. TokenText asks
 * for one token alone at nearly every release (the context the next piece
 * is cut from), and that text never changes; decoding it again cost about
 * 11 µs a token in a decode loop (docs/streaming-measurements.md, "Ninth
 * session"). The map is bounded by the vocabulary, and in practice by the
 * tokens a process has streamed.
 */
export function rememberingSingleTokens(decode: Decode): Decode {
  const alone = new Map<number, string>();
  return (ids) => {
    if (ids.length !== 1) return decode(ids);
    const id = ids[0]!;
    let text = alone.get(id);
    if (text === undefined) {
      text = decode(ids);
      alone.set(id, text);
    }
    return text;
  };
}

export class TokenText {
  private readonly ids: number[] = [];
  /** Start of the tokens decoded as context for the next piece. */
  private contextStart = 0;
  /** Tokens before this one are released as text. */
  private released = 0;
  private emitted = "";
  /** The context tokens decoded: it changes only when text is released. */
  private context = "";

  constructor(private readonly decode: Decode) {}

  /** The text this token completes: empty while a character or piece is unfinished. */
  push(id: number): string {
    this.ids.push(id);
    const withNew = this.decode(this.ids.slice(this.contextStart));
    const context = this.context;
    if (withNew.length <= context.length || withNew.endsWith(REPLACEMENT)) return "";
    if (!withNew.startsWith(context)) return "";
    const piece = withNew.slice(context.length);
    this.contextStart = this.released;
    this.released = this.ids.length;
    this.context = this.decode(this.ids.slice(this.contextStart, this.released));
    this.emitted += piece;
    return piece;
  }

  /**
   * What is left once the sequence has ended, given the whole output's text:
   * the held-back remainder, so that everything released adds up to it.
   * Empty when the pieces already do (or, never seen, when they diverged).
   */
  finish(whole: string): string {
    if (!whole.startsWith(this.emitted)) return "";
    const rest = whole.slice(this.emitted.length);
    this.emitted = whole;
    return rest;
  }

  /** Everything released so far. */
  get text(): string {
    return this.emitted;
  }
}
