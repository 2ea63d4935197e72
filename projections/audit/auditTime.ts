/**
 * An ISO 8601 / RFC 3339 time with its offset: `YYYY-MM-DDThh:mm[:ss[.fraction]]` then `Z` or `±hh:mm`
 * (or `±hhmm`). A time without an offset would be read in the host's time zone, so the same command
 * would check another range on another machine: it is refused, as is a date alone.
 */
const TIME_WITH_OFFSET = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(?:(Z)|([+-])(\d{2}):?(\d{2}))$/i;

/**
 * The instant of `value` (`verify --from/--to`), or a RangeError saying why it is not one: no offset,
 * or a field out of range (2026-02-30 is refused, not rolled over to March). Fractions of a second
 * beyond milliseconds are cut.
 */
export function parseAuditTime(value: string): Date {
  const match = TIME_WITH_OFFSET.exec(value);
  if (!match) {
    const hint = /^\d{4}-\d{2}-\d{2}(T[\d:.]+)?$/i.test(value) ? " (it has no offset: add Z for UTC, or +hh:mm)" : "";
    throw new RangeError(`not an ISO 8601 time with Z or an offset, such as 2026-01-31T00:00:00Z: ${value}${hint}`);
  }
  const [, y, mo, d, h, mi, s = "0", fraction = "", z, sign, oh, om] = match;
  const [year, month, day, hour, minute, second] = [y, mo, d, h, mi, s].map(Number) as [number, number, number, number, number, number];
  const offsetMinutes = z ? 0 : (sign === "-" ? -1 : 1) * (Number(oh) * 60 + Number(om));
  const local = new Date(Date.UTC(year, month - 1, day, hour, minute, second, Math.floor(Number(`0${fraction || ".0"}`) * 1000)));
  const inRange =
    local.getUTCFullYear() === year &&
    local.getUTCMonth() === month - 1 &&
    local.getUTCDate() === day &&
    local.getUTCHours() === hour &&
    local.getUTCMinutes() === minute &&
    local.getUTCSeconds() === second &&
    (z !== undefined || (Number(oh) <= 23 && Number(om) <= 59));
  if (!inRange) throw new RangeError(`not a valid time (a field is out of range): ${value}`);
  return new Date(local.getTime() - offsetMinutes * 60_000);
}
