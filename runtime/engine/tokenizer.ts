import { Tokenizer } from "@huggingface/tokenizers";

/**
 * A typed face over @huggingface/tokenizers, whose declarations are loose.
 * The model's own tokenizer counts usage, so this is also the meter.
 */
export interface Encoded {
  ids: number[];
  typeIds: number[];
}

export class TextTokenizer {
  private readonly tokenizer: Tokenizer;

  constructor(tokenizerJson: object, tokenizerConfig: object) {
    this.tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
  }

  /** Encodes text, with the model's special tokens unless told otherwise. */
  encode(text: string, options: { addSpecialTokens?: boolean; pair?: string } = {}): Encoded {
    const encoding = this.tokenizer.encode(text, {
      text_pair: options.pair ?? null,
      add_special_tokens: options.addSpecialTokens ?? true,
      return_token_type_ids: true,
    });
    return { ids: encoding.ids, typeIds: encoding.token_type_ids };
  }

  decode(ids: readonly number[], options: { skipSpecialTokens?: boolean } = {}): string {
    return this.tokenizer.decode([...ids], {
      skip_special_tokens: options.skipSpecialTokens ?? true,
    });
  }

  tokenId(token: string): number | undefined {
    return this.tokenizer.token_to_id(token);
  }
}
