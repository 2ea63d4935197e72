import { h } from "preact";
import htm from "htm";

/** Tagged templates that build Preact elements (no JSX, so no build step). */
export const html = htm.bind(h);
