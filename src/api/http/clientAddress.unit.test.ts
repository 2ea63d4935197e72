import { describe, expect, it } from "vitest";
import { normalAddress } from "./clientAddress.ts";

describe("normalAddress", () => {
  it("writes one client's forms of its address alike", () => {
    for (const form of ["1.1.1.1", "1.1.1.1:1234", "::ffff:1.1.1.1", "::FFFF:1.1.1.1", "[::ffff:1.1.1.1]:80"]) expect(normalAddress(form)).toBe("1.1.1.1");
    for (const form of ["2001:db8::1", "[2001:db8::1]", "[2001:db8::1]:443", "2001:DB8::1"]) expect(normalAddress(form)).toBe("2001:db8::1");
  });

  it("leaves what is no address form it knows as it is (lower-cased)", () => {
    expect(normalAddress("")).toBe("");
    expect(normalAddress("unknown")).toBe("unknown");
    expect(normalAddress("1.1.1.1:99999999")).toBe("1.1.1.1:99999999");
  });
});
