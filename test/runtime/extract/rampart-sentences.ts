/**
 * Sentences with the entities rampart-pii finds in them at the default
 * threshold, each checked by eye against the text: [label, start, end, text]
 * with UTF-16 offsets. Shared with the parity test against transformers.js.
 */
export type Expected = [label: string, start: number, end: number, text: string];

export const RAMPART_SENTENCES: Array<{ text: string; entities: Expected[] }> = [
  {
    text: "John Smith lives in Paris and his email is john@example.com",
    entities: [
      ["GIVEN_NAME", 0, 4, "John"],
      ["SURNAME", 5, 10, "Smith"],
      ["EMAIL", 43, 59, "john@example.com"],
    ],
  },
  {
    text: "Please ship the order to 742 Evergreen Terrace, Springfield, IL 62704.",
    entities: [
      ["BUILDING_NUMBER", 25, 28, "742"],
      ["STREET_NAME", 29, 46, "Evergreen Terrace"],
      ["CITY", 48, 59, "Springfield"],
      ["STATE", 61, 63, "IL"],
      ["ZIP_CODE", 64, 69, "62704"],
    ],
  },
  {
    text: "Springfield, IL 62704",
    entities: [
      ["CITY", 0, 11, "Springfield"],
      ["STATE", 13, 15, "IL"],
      ["ZIP_CODE", 16, 21, "62704"],
    ],
  },
  {
    text: "You can reach Dr. Emily Chen on (415) 555-0132 or emily.chen@hospital.org.",
    entities: [
      ["GIVEN_NAME", 18, 23, "Emily"],
      ["SURNAME", 24, 28, "Chen"],
      ["PHONE", 32, 46, "(415) 555-0132"],
      ["EMAIL", 50, 73, "emily.chen@hospital.org"],
    ],
  },
  {
    text: "Contact Sarah Connor at sarah.connor@skynet.io or 212-555-0147.",
    entities: [
      ["GIVEN_NAME", 8, 13, "Sarah"],
      ["SURNAME", 14, 20, "Connor"],
      ["EMAIL", 24, 46, "sarah.connor@skynet.io"],
      ["PHONE", 50, 62, "212-555-0147"],
    ],
  },
  {
    text: "Please call me at (202) 555-0198 tomorrow.",
    entities: [["PHONE", 18, 32, "(202) 555-0198"]],
  },
  {
    text: "Zoë Müller wohnt in der Hauptstraße 5, 10115 Berlin.",
    entities: [
      ["GIVEN_NAME", 0, 3, "Zoë"],
      ["SURNAME", 4, 10, "Müller"],
      ["STREET_NAME", 24, 35, "Hauptstraße"],
      ["BUILDING_NUMBER", 36, 37, "5"],
      ["ZIP_CODE", 39, 44, "10115"],
      ["CITY", 45, 51, "Berlin"],
    ],
  },
  { text: "The meeting is on Tuesday; bring the slides.", entities: [] },
];
