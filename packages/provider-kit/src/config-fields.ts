import * as v from "valibot";

/** A whole number from 1 to `max`: counts, sizes and durations in ms of provider configs. */
export const positiveInt = (max: number) => v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(max));

/** True for a URL whose protocol is one of `protocols` (`"amqp:"`) and, with `needsHost`, that names a host. */
function isUrlOf(value: string, protocols: readonly string[], needsHost: boolean): boolean {
  try {
    const parsed = new URL(value);
    return protocols.includes(parsed.protocol) && (!needsHost || parsed.hostname !== "");
  } catch {
    return false;
  }
}

/**
 * A broker URL field: a string the URL parser takes, with one of `protocols` (`["amqp:", "amqps:"]`)
 * and, with `needsHost`, a host. `message` is the issue a config error reports, with an example.
 */
export const brokerUrl = (
  protocols: readonly string[],
  message: string,
  options: { needsHost?: boolean } = {},
) =>
  v.pipe(
    v.string(),
    v.check((value) => isUrlOf(value, protocols, options.needsHost ?? false), message),
  );
