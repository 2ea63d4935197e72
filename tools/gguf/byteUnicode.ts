/**
 * GPT-2's reversible byte <-> unicode mapping: printable bytes map to themselves, the others to
 * code points from 256 upwards, so every byte sequence becomes a string without spaces or
 * control characters (space becomes "Ġ", newline "Ċ").
 */
export type ByteUnicode = {
  byteToChar: readonly string[];
  charToByte: ReadonlyMap<string, number>;
};

export function byteUnicode(): ByteUnicode {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b += 1) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b += 1) printable.push(b);
  for (let b = 0xae; b <= 0xff; b += 1) printable.push(b);
  const byteToChar: string[] = new Array<string>(256);
  const printableSet = new Set(printable);
  let extra = 0;
  for (let b = 0; b < 256; b += 1) {
    if (printableSet.has(b)) byteToChar[b] = String.fromCodePoint(b);
    else {
      byteToChar[b] = String.fromCodePoint(256 + extra);
      extra += 1;
    }
  }
  const charToByte = new Map<string, number>();
  byteToChar.forEach((char, b) => {
    charToByte.set(char, b);
  });
  return { byteToChar, charToByte };
}

export function bytesToUnicodeString(bytes: Uint8Array, mapping: ByteUnicode): string {
  let out = "";
  for (const b of bytes) out += mapping.byteToChar[b]!;
  return out;
}
