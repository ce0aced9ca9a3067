/**
 * Exit code of a command that stalled: `factflow run --stall-timeout` gave up, or the process was
 * left with nothing that could finish the command.
 */
export const STALLED_EXIT_CODE = 3;

let handler: (() => void) | undefined;

/**
 * Until the returned function is called, `onDrained` is called (once) instead of the generic
 * message if the event loop runs empty while the command has not returned: nothing in the process
 * (timer, socket, file, worker) is left that could settle what it waits for.
 */
export function onDrain(onDrained: () => void): () => void {
  handler = onDrained;
  return () => {
    if (handler === onDrained) handler = undefined;
  };
}

/**
 * Makes sure a command never ends on an unsettled await (Node's silent exit code 13): when the
 * event loop drains before `finished()` is true, the command's drain handler runs (it may do more
 * asynchronous work, e.g. diagnose and report); a second drain, or one with no handler, prints
 * `message` and exits with {@link STALLED_EXIT_CODE}.
 */
export function guardAgainstDrain(finished: () => boolean, printError: (text: string) => void): void {
  let handled = false;
  process.on("beforeExit", () => {
    if (finished()) return;
    if (handler !== undefined && !handled) {
      handled = true;
      handler();
      return;
    }
    printError(
      "factflow: the command cannot finish: nothing in this process is left to settle what it waits for (a promise nobody will resolve, in an adapter, a provider or factflow itself). Exiting.",
    );
    process.exit(STALLED_EXIT_CODE);
  });
}
