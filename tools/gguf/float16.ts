/**
 * IEEE 754 binary16 conversion (round to nearest, ties to even), as ggml's GGML_FP32_TO_FP16.
 */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function float32ToFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  let e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mantissa & ((1 << shift) - 1);
    let result = mantissa >>> shift;
    if (rest > half || (rest === half && (result & 1) === 1)) result += 1;
    return sign | result;
  }
  let result = mantissa >>> 13;
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (result & 1) === 1)) {
    result += 1;
    if (result === 0x400) {
      result = 0;
      e += 1;
      if (e >= 0x1f) return sign | 0x7c00;
    }
  }
  return sign | (e << 10) | result;
}

export function float16BitsToFloat32(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa === 0 ? sign * Infinity : NaN;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}
