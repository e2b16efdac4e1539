import { PROMPT_CANDIDATES } from "./generation-prompt.js";
import type { ChatMessage } from "./peer.js";

/**
 * Chat prompts for SmolLM2: the fixture's ~30-token candidates, and ~500-token
 * ones (a long passage to summarise) for the time a long prompt step takes.
 * Greedy decoding picks the first candidate that makes 64 tokens without
 * meeting end-of-sequence; asking for a detailed summary keeps it talking.
 */
export const SHORT_PROMPTS: ReadonlyArray<ChatMessage[]> = PROMPT_CANDIDATES;

const PASSAGE = [
  "The first lighthouses were fires lit on hilltops to guide ships home at night. The most famous of the",
  "ancient lights stood on the island of Pharos, near the harbour of Alexandria, and for centuries it was",
  "counted among the wonders of the world. Its keepers burned wood and later oil, and a great polished",
  "mirror is said to have thrown the light far out to sea. After the fall of Rome few new lights were built,",
  "and sailors relied on local knowledge, church towers and the shape of the coast. In the seventeenth and",
  "eighteenth centuries trade across the oceans grew quickly, and so did the number of wrecks. Governments",
  "and merchants began to build towers on dangerous headlands and on rocks far from land. Building on a rock",
  "that is covered by the sea at high tide was among the hardest tasks engineers faced. The Eddystone rocks",
  "off the south coast of England saw four towers: the first two were of timber, one washed away in a great",
  "storm and one burned, and the third, built of interlocking blocks of granite, stood for more than a",
  "hundred years until the rock beneath it began to crack. Its design shaped lighthouse building for the",
  "next century. Lamps improved as well. Candles gave way to oil lamps with many wicks, then to a single",
  "bright burner with a glass chimney. The greatest change came from a French engineer, Augustin Fresnel,",
  "who designed a lens made of rings of glass prisms. His lens caught almost all of the light of a lamp and",
  "bent it into a single beam that could be seen more than twenty miles away. Lenses were turned by",
  "clockwork so that each light flashed in its own pattern, and sailors could tell one lighthouse from",
  "another by counting the flashes. Life for the keepers was often lonely and hard. They wound the",
  "clockwork through the night, trimmed the wicks, cleaned the glass and kept a log of the weather and of",
  "passing ships. On remote rocks they might not see the shore for weeks when storms kept the supply boats",
  "away. Some keepers brought their families, and children grew up on islands with no other houses. In the",
  "twentieth century electric lamps replaced oil, radio beacons and later satellite navigation changed how",
  "ships found their way, and one by one the lights were automated. Today most lighthouses run without",
  "keepers, checked from a distance, and many of the old towers have become museums, holiday homes or",
  "simply landmarks that people walk out to on a summer evening to watch the sun go down over the water.",
].join(" ");

export const LONG_PROMPTS: ReadonlyArray<ChatMessage[]> = [
  [
    { role: "system", content: "You are a helpful assistant who writes detailed summaries." },
    {
      role: "user",
      content: `Read this text and then summarise it in detail, paragraph by paragraph.\n\n${PASSAGE}`,
    },
  ],
  [
    { role: "system", content: "You are a helpful assistant." },
    {
      role: "user",
      content: `${PASSAGE}\n\nWrite a long essay about the history of lighthouses based on the text above.`,
    },
  ],
];
