/**
 * Returns `url` with its password replaced by `<redacted>`, safe to print in errors and logs. A string
 * the URL parser refuses still has any `user:password@` part of it redacted.
 */
export function redactUrl(url: string): string {
  try {
    const parsed = new URL(url);
    if (parsed.password === "") return url;
    parsed.password = "__REDACTED__";
    return parsed.toString().replace("__REDACTED__", "<redacted>");
  } catch {
    return url.replace(/\/\/([^:/@]*):([^@/]*)@/, "//$1:<redacted>@");
  }
}

/**
 * Removes the password of `url` from `text` wherever it appears: the whole URL, the raw password and
 * its URL-decoded form (a broker's error message may quote any of them).
 */
export function redactSecrets(text: string, url: string): string {
  let out = text.split(url).join(redactUrl(url));
  try {
    const password = new URL(url).password;
    if (password.length >= 3) {
      out = out.split(password).join("<redacted>");
      const decoded = decodeURIComponent(password);
      if (decoded !== password) out = out.split(decoded).join("<redacted>");
    }
  } catch {
    // Not a URL: nothing more to hide than the literal string replaced above.
  }
  return out;
}
