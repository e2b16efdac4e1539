import type { ChatPrompt } from "./transformers-reference.js";

/**
 * Prompts of clearly different lengths for the real decoder, written for
 * these tests. The lengths matter more than the wording: they exercise the
 * prefill of short and long prompts and positions far into the KV cache.
 * The chat template adds about 14 tokens around a system and a user turn,
 * and a 20-token default system message when there are no instructions.
 */

const HARBOUR = [
  "The old harbour town of Kelwick sits at the mouth of a narrow river, where fishing boats have tied up for four hundred years.",
  "Its lighthouse was built in 1821 from granite carried by barge from a quarry twenty miles upstream.",
  "For most of the nineteenth century the keeper's family lived in the tower itself, trimming the wicks and polishing the lens every evening.",
  "In 1903 a storm tore the lantern room open, and the keeper kept a paraffin lamp burning by hand until the weather cleared three days later.",
  "The town grew rich on herring, then poor when the shoals moved north, and many families left for the cities in the 1930s.",
  "After the war a boatyard opened on the east quay and began building small wooden yachts for buyers from the capital.",
  "Tourists followed the yachts, and by the 1970s the fish market had become a row of cafes and a museum of the sea.",
  "The lighthouse was automated in 1986, and the last keeper moved into a cottage on the hill from which he could still see the beam.",
  "Today a volunteer society opens the tower on summer weekends and tells visitors about the storm, the herring and the boatyard.",
  "Each August the town holds a regatta in which the old wooden yachts race around a buoy off the point and back to the quay.",
];

const GARDEN = [
  "A kitchen garden needs six hours of sun a day, soil that drains well, and a water supply close enough that watering is never a chore.",
  "Start small: four raised beds of one by two metres are enough to keep a family in salad, beans and herbs from May to October.",
  "Rotate crops each year so that the same family of plants does not grow in the same bed twice in a row, which keeps pests and diseases down.",
  "Compost everything from the kitchen that is not meat or fat, and turn the heap every few weeks so that it stays warm and breaks down quickly.",
  "Sow carrots and parsnips directly where they will grow, since their roots fork when moved, but start tomatoes and peppers indoors in early spring.",
  "Water in the morning rather than the evening, because wet leaves overnight invite mildew and slugs.",
  "Mulch the beds with straw or shredded leaves in summer to keep the soil moist and the weeds down.",
  "Keep a notebook of what was sown where and when, what did well and what failed, because memory is a poor guide from one year to the next.",
  "Leave a corner wild for insects: the hoverflies and ladybirds that live there will eat many of the aphids on your beans.",
  "At the end of the season, sow a green manure such as clover on empty beds and dig it in before it flowers in spring.",
];

export const HARBOUR_TEXT = HARBOUR.join(" ");
export const GARDEN_TEXT = GARDEN.join(" ");

export interface LengthCase {
  name: string;
  prompt: ChatPrompt;
}

export const FRANCE: ChatPrompt = { input: "What is the capital of France?" };
export const FRANCE_ANSWER = "The capital of France is Paris.";

/** Roughly 19, 37, 62, 150 and 400 prompt tokens once the template is applied. */
export const LENGTH_CASES: LengthCase[] = [
  { name: "shortest", prompt: { instructions: "Be brief.", input: "Hi!" } },
  { name: "france", prompt: FRANCE },
  {
    name: "question",
    prompt: {
      instructions: "You are a careful assistant. Answer in one or two sentences.",
      input:
        "My bicycle chain keeps slipping off the rear cog when I change to the smallest gear on a steep hill. What is the most likely cause, and what should I check first?",
    },
  },
  {
    name: "summary",
    prompt: { input: `${HARBOUR.slice(0, 4).join(" ")}\n\nSummarize this text in one sentence.` },
  },
  {
    name: "long",
    prompt: {
      instructions: "You answer questions about the text the user gives you.",
      input: `${HARBOUR_TEXT}\n\n${GARDEN.slice(0, 3).join(" ")}\n\nWhen was the lighthouse built?`,
    },
  },
];
