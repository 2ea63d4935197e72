import { describe, expect, it } from "vitest";
import { normalAddress } from "./clientAddress.ts";

describe("normalAddress", () => {
  it("writes one client's forms of an IPv4 address alike", () => {
    for (const form of [
      "1.1.1.1",
      " 1.1.1.1 ",
      "1.1.1.1:1234",
      "::ffff:1.1.1.1",
      "::FFFF:1.1.1.1",
      "[::ffff:1.1.1.1]:80",
      "::ffff:101:101",
      "0:0:0:0:0:ffff:1.1.1.1",
    ])
      expect(normalAddress(form), form).toBe("1.1.1.1");
  });

  it("counts an IPv6 address as its /64, whatever its spelling, port or zone", () => {
    const forms = [
      "2001:db8::1",
      "[2001:db8::1]",
      "[2001:db8::1]:443",
      "2001:DB8:0:0:0:0:0:1",
      "2001:0db8::0001",
      "2001:db8:0::1",
      "2001:db8::c",
      "2001:db8::1%eth0",
    ];
    for (const form of forms) expect(normalAddress(form), form).toBe("2001:db8:0:0::/64");
    expect(normalAddress("2001:db8:7:7::1")).toBe("2001:db8:7:7::/64");
    expect(normalAddress("2001:db8:7:8::1")).toBe("2001:db8:7:8::/64");
    expect(normalAddress("::1")).toBe("0:0:0:0::/64");
  });

  it("leaves what is no address form it knows as it is (lower-cased)", () => {
    expect(normalAddress("")).toBe("");
    expect(normalAddress("unknown")).toBe("unknown");
    expect(normalAddress("1.1.1.1:99999999")).toBe("1.1.1.1:99999999");
    expect(normalAddress("1:2:3:4:5:6:7:8:9")).toBe("1:2:3:4:5:6:7:8:9");
    expect(normalAddress("1::2::3")).toBe("1::2::3");
  });
});
