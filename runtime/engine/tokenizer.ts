import { Tokenizer } from "@huggingface/tokenizers";

/**
 * A typed face over @huggingface/tokenizers. Its declaration files use
 * extensionless imports that NodeNext cannot resolve, so the few methods we
 * call are declared here. The model's own tokenizer counts usage, so this is
 * also the meter.
 */
interface RawTokenizer {
  encode(
    text: string,
    options: { text_pair: string | null; add_special_tokens: boolean; return_token_type_ids: true },
  ): { ids: number[]; tokens: string[]; token_type_ids?: number[] };
  decode(ids: number[], options: { skip_special_tokens: boolean }): string;
  token_to_id(token: string): number | undefined;
  get_added_tokens_decoder(): Map<number, { content: string; special: boolean }>;
}

export interface Encoded {
  ids: number[];
  typeIds: number[];
}

export class TextTokenizer {
  private readonly tokenizer: RawTokenizer;

  constructor(tokenizerJson: object, tokenizerConfig: object) {
    // eslint-disable-next-line @typescript-eslint/no-unsafe-call -- see RawTokenizer
    this.tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig) as RawTokenizer;
  }

  /** Encodes text, with the model's special tokens unless told otherwise. */
  encode(text: string, options: { addSpecialTokens?: boolean; pair?: string } = {}): Encoded {
    const encoding = this.tokenizer.encode(text, {
      text_pair: options.pair ?? null,
      add_special_tokens: options.addSpecialTokens ?? true,
      return_token_type_ids: true,
    });
    return { ids: encoding.ids, typeIds: encoding.token_type_ids ?? encoding.ids.map(() => 0) };
  }

  /** The token strings beside the ids, without special tokens: what offsets are found from. */
  pieces(text: string): { ids: number[]; tokens: string[] } {
    const encoding = this.tokenizer.encode(text, {
      text_pair: null,
      add_special_tokens: false,
      return_token_type_ids: true,
    });
    return { ids: encoding.ids, tokens: encoding.tokens };
  }

  /** Ids of the tokens marked special (`[CLS]`, `[PAD]`, ...): they never stand for input text. */
  specialIds(): Set<number> {
    const ids = new Set<number>();
    for (const [id, token] of this.tokenizer.get_added_tokens_decoder()) {
      if (token.special) ids.add(id);
    }
    return ids;
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    // The library refuses an empty list; nothing decodes to nothing.
    if (ids.length === 0) return "";
    return this.tokenizer.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? true,
    });
  }

  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }
}
