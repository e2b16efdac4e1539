import { Template } from "@huggingface/jinja";
import type { ChatMessage } from "../../api/input-items.js";
import type { TextTokenizer } from "../engine/tokenizer.js";

/**
 * Turns `instructions` and `input` into prompt token ids: through the
 * tokenizer's chat template when the model has one (instructions as the
 * system message, input as the user message, the generation prompt added),
 * and as plain text otherwise.
 */
export class PromptBuilder {
  private readonly template: Template | null;
  private readonly specialTokens: Record<string, string>;

  /**
   * `chatTemplateFile` is the folder's `chat_template.jinja`, used when
   * `tokenizer_config.json` carries no template (newer transformers releases
   * and onnxruntime-genai's builder keep it in its own file).
   */
  constructor(
    private readonly tokenizer: TextTokenizer,
    tokenizerConfig: Record<string, unknown>,
    chatTemplateFile: string | null = null,
  ) {
    const source = chatTemplateSource(tokenizerConfig.chat_template) ?? chatTemplateFile;
    this.template = source ? new Template(source) : null;
    this.specialTokens = {};
    for (const name of ["bos_token", "eos_token", "pad_token", "unk_token"]) {
      const token = tokenText(tokenizerConfig[name]);
      if (token !== undefined) this.specialTokens[name] = token;
    }
  }

  get usesChatTemplate(): boolean {
    return this.template !== null;
  }

  render(instructions: string | undefined, input: string): string {
    return this.renderTurns(instructions, [{ role: "user", content: input }]);
  }

  /**
   * A conversation (`input` as a list of messages): the turns in order after
   * the instructions. `developer` is the Responses API's name for what chat
   * templates call `system`. Without a template, the turns' text in order.
   */
  renderTurns(instructions: string | undefined, turns: readonly ChatMessage[]): string {
    if (!this.template) {
      const text = turns.map((turn) => turn.content).join("\n\n");
      return instructions ? `${instructions}\n\n${text}` : text;
    }
    const messages = [
      ...(instructions !== undefined ? [{ role: "system", content: instructions }] : []),
      ...turns.map((turn) => ({
        role: turn.role === "developer" ? "system" : turn.role,
        content: turn.content,
      })),
    ];
    return this.template.render({ messages, add_generation_prompt: true, ...this.specialTokens });
  }

  encode(instructions: string | undefined, input: string): number[] {
    return this.encodeTurns(instructions, [{ role: "user", content: input }]);
  }

  /** A rendered chat template already holds its special tokens; plain text gets the tokenizer's. */
  encodeTurns(instructions: string | undefined, turns: readonly ChatMessage[]): number[] {
    return this.tokenizer.encode(this.renderTurns(instructions, turns), {
      addSpecialTokens: !this.template,
    }).ids;
  }
}

function chatTemplateSource(value: unknown): string | null {
  if (typeof value === "string") return value;
  // Some tokenizers ship named templates: [{ name: "default", template }].
  if (Array.isArray(value)) {
    const named = value as Array<{ name?: string; template?: string }>;
    return (named.find((t) => t.name === "default") ?? named[0])?.template ?? null;
  }
  return null;
}

function tokenText(value: unknown): string | undefined {
  if (typeof value === "string") return value;
  if (typeof value === "object" && value !== null && "content" in value) {
    return typeof value.content === "string" ? value.content : undefined;
  }
  return undefined;
}
