import type { ExtractedEntity } from "./extractor.js";

/**
 * BIO (and BIOES) tags of a token-classification model, and how per-token
 * predictions join into entities. Pure: the classifier hands in each token's
 * winning tag, its probability and its character offsets.
 */

export interface Tag {
  /** `B`egin, `I`nside, `E`nd, `S`ingle; `O` is no entity. */
  prefix: "B" | "I" | "E" | "S" | "O";
  /** The entity type (`EMAIL` of `B-EMAIL`); empty for `O`. */
  type: string;
}

export function parseTag(label: string): Tag {
  const match = /^([BIES])[-_](.+)$/.exec(label);
  if (match) return { prefix: match[1] as Tag["prefix"], type: match[2]! };
  if (label === "O" || label === "") return { prefix: "O", type: "" };
  // A model without prefixes tags every token of an entity with its type.
  return { prefix: "I", type: label };
}

/** The entity types of a label list, in the order they first appear. */
export function entityTypes(tags: readonly Tag[]): string[] {
  const types: string[] = [];
  for (const tag of tags) if (tag.prefix !== "O" && !types.includes(tag.type)) types.push(tag.type);
  return types;
}

export interface TokenPrediction {
  /** null for `O` and for special tokens, which never carry an entity. */
  tag: Tag | null;
  score: number;
  start: number;
  end: number;
}

/**
 * Joins tokens into entities. A token continues the open entity of its type
 * when its tag says so (`I`, `E`), or when it is glued to it in the text (no
 * character between them): word pieces and the parts of an e-mail address
 * are often each tagged `B`, and they are one entity. Anything else starts a
 * new entity; `O` closes. The score is the mean of the tokens' probabilities.
 */
export function joinEntities(tokens: readonly TokenPrediction[]): ExtractedEntity[] {
  const entities: ExtractedEntity[] = [];
  let open: { entity: ExtractedEntity; sum: number; count: number; closed: boolean } | null = null;
  for (const token of tokens) {
    const tag = token.tag;
    if (!tag || tag.prefix === "O" || token.end <= token.start) {
      open = null;
      continue;
    }
    const glued = open !== null && token.start === open.entity.end;
    const continues =
      open !== null &&
      open.entity.label === tag.type &&
      (glued || (!open.closed && (tag.prefix === "I" || tag.prefix === "E")));
    if (open && continues) {
      open.entity.end = token.end;
      open.sum += token.score;
      open.count += 1;
      open.entity.score = open.sum / open.count;
      open.closed = tag.prefix === "E" || tag.prefix === "S";
      continue;
    }
    const entity = { label: tag.type, start: token.start, end: token.end, score: token.score };
    entities.push(entity);
    open = { entity, sum: token.score, count: 1, closed: tag.prefix === "E" || tag.prefix === "S" };
  }
  return entities;
}
