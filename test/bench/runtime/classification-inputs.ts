/**
 * Request bodies for the classification points: sentences of about twenty
 * words with three to five candidate labels each, and a long variant (about
 * 150 words) that makes each model run heavier relative to the fixed cost of
 * an HTTP request.
 */
const SENTENCES: ReadonlyArray<{ text: string; categories: string[] }> = [
  {
    text: "The home side scored twice in the final ten minutes and the crowd stayed long after the whistle to celebrate.",
    categories: ["sports", "politics", "cooking"],
  },
  {
    text: "After a long debate the parliament passed the budget, and the minister promised new elections before the end of spring.",
    categories: ["politics", "finance", "sports", "travel"],
  },
  {
    text: "Whisk the eggs with sugar, fold in the flour gently, and bake the batter in a hot oven for twenty minutes.",
    categories: ["cooking", "science", "music", "sports", "health"],
  },
  {
    text: "Shares fell sharply on Monday as investors worried that rising interest rates would slow lending across the whole economy.",
    categories: ["finance", "weather", "cooking"],
  },
  {
    text: "The orchestra opened the season with a new symphony, and the young violinist drew a standing ovation from the hall.",
    categories: ["music", "politics", "technology", "sports"],
  },
  {
    text: "Heavy rain and strong winds are expected along the coast tonight, so the ferry service has been cancelled until Thursday.",
    categories: ["weather", "travel", "finance", "music", "health"],
  },
  {
    text: "The new phone ships with a faster chip, a brighter screen and a battery that the company says lasts two full days.",
    categories: ["technology", "cooking", "politics"],
  },
  {
    text: "Doctors recommend thirty minutes of walking each day, plenty of water, and enough sleep to keep the heart in good shape.",
    categories: ["health", "sports", "finance", "science"],
  },
];

function body(model: string, input: string, categories: string[]): string {
  return JSON.stringify({ model, input, categories });
}

export function shortBodies(model: string): string[] {
  return SENTENCES.map((s) => body(model, s.text, s.categories));
}

/** Each long input is six of the sentences in a row, labelled like the first. */
export function longBodies(model: string): string[] {
  return SENTENCES.map((s, i) => {
    const text = Array.from({ length: 6 }, (_, k) => SENTENCES[(i + k) % SENTENCES.length]!.text);
    return body(model, text.join(" "), s.categories);
  });
}
