/**
 * The first `dimensions` values of an embedding, scaled back to unit length (what OpenAI does for
 * `dimensions` on Matryoshka-trained models). A prefix of zeros stays zeros.
 */
export function truncatedEmbedding(vector: readonly number[], dimensions: number): number[] {
  const prefix = vector.slice(0, dimensions);
  const norm = Math.sqrt(prefix.reduce((sum, value) => sum + value * value, 0));
  return norm === 0 ? prefix : prefix.map((value) => value / norm);
}
