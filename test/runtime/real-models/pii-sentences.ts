/**
 * Sentences with names, e-mail addresses, phone numbers and postal
 * addresses, for the rampart-pii parity test and the entity-extraction
 * benchmark. `expected` lists the entities a reader finds in the sentence
 * (label and text; offsets follow from the text) where rampart-pii finds
 * exactly those at the default threshold; it is null where the model itself
 * is wrong or debatable (an e-mail split by an `O` piece, a company domain
 * taken for a city, "Li Wei" as one given name), and such sentences are
 * compared with the reference only.
 */
export interface PiiSentence {
  text: string;
  expected: Array<[label: string, text: string]> | null;
}

export const PII_SENTENCES: readonly PiiSentence[] = [
  {
    // The behaviour shared/models/README.md records for this model.
    text: "John Smith lives in Paris and his email is john@example.com",
    expected: [
      ["GIVEN_NAME", "John"],
      ["SURNAME", "Smith"],
      ["EMAIL", "john@example.com"],
    ],
  },
  {
    // The model finds the phone number only as a fragment ("7", scored near 0.5) and takes
    // the sentence's full stop into the e-mail address, which it touches.
    text: "Call Maria Gonzalez on (555) 123-4567 or write to maria.gonzalez@acme-corp.com.",
    expected: null,
  },
  {
    text: "Ship the parcel to 742 Evergreen Terrace, Springfield, IL 62704, attention of Homer Simpson.",
    expected: [
      ["BUILDING_NUMBER", "742"],
      ["STREET_NAME", "Evergreen Terrace"],
      ["CITY", "Springfield"],
      ["STATE", "IL"],
      ["ZIP_CODE", "62704"],
      ["GIVEN_NAME", "Homer"],
      ["SURNAME", "Simpson"],
    ],
  },
  {
    text: "My name is Aisha Khan, my phone number is +1 415 555 0199 and I live at 1600 Pennsylvania Avenue NW, Washington, DC 20500.",
    expected: [
      ["GIVEN_NAME", "Aisha"],
      ["SURNAME", "Khan"],
      ["PHONE", "+1 415 555 0199"],
      ["BUILDING_NUMBER", "1600"],
      ["STREET_NAME", "Pennsylvania Avenue NW"],
      ["CITY", "Washington"],
      ["STATE", "DC"],
      ["ZIP_CODE", "20500"],
    ],
  },
  {
    text: "Dear Mr. Robert Brown, we have updated your address to 221 Baker Street, Apt 4B, Boston, MA 02116.",
    expected: [
      ["GIVEN_NAME", "Robert"],
      ["SURNAME", "Brown"],
      ["BUILDING_NUMBER", "221"],
      ["STREET_NAME", "Baker Street"],
      ["SECONDARY_ADDRESS", "Apt 4B"],
      ["CITY", "Boston"],
      ["STATE", "MA"],
      ["ZIP_CODE", "02116"],
    ],
  },
  {
    // Accented letters: the tokenizer strips accents, the offsets stay the input's.
    text: "José Álvarez moved to 55 Oak Lane, Austin, TX 73301 and his new number is (512) 555-7788.",
    expected: [
      ["GIVEN_NAME", "José"],
      ["SURNAME", "Álvarez"],
      ["BUILDING_NUMBER", "55"],
      ["STREET_NAME", "Oak Lane"],
      ["CITY", "Austin"],
      ["STATE", "TX"],
      ["ZIP_CODE", "73301"],
      ["PHONE", "(512) 555-7788"],
    ],
  },
  {
    // The model tags "university" O inside the address: two EMAIL pieces, not one.
    text: "You can reach Dr. Emily Chen by email at echen@university.edu or by phone at 617-555-0142.",
    expected: null,
  },
  {
    // The model misses the first address and takes its domain for a city.
    text: "Send the invoice to billing@northwind.io and copy Peter Müller, peter.mueller@example.de.",
    expected: null,
  },
  {
    // "PO Box 1234" goes unnoticed; the state scores low.
    text: "Hi, I'm Sarah O'Connor. Text me at 555.867.5309 or write to PO Box 1234, Denver, CO 80202.",
    expected: null,
  },
  {
    // "Li Wei" and "Fatima Zahra" come out as one given name each (I- continuation).
    text: "The meeting with Li Wei and Fatima Zahra is at 10 Downing Street; confirm with li.wei@example.org.",
    expected: null,
  },
  {
    text: "Nothing personal here: the weather was mild and the train left on time.",
    expected: [],
  },
];

/** The expected entities with their offsets, each found after the previous one. */
export function expectedSpans(
  sentence: PiiSentence,
): Array<{ label: string; start: number; end: number; text: string }> | null {
  if (!sentence.expected) return null;
  let from = 0;
  return sentence.expected.map(([label, text]) => {
    const start = sentence.text.indexOf(text, from);
    if (start < 0) throw new Error(`${JSON.stringify(text)} is not in ${sentence.text}`);
    from = start + text.length;
    return { label, start, end: from, text };
  });
}
