// Command-line options of the benchmark scripts: `--name value` pairs read
// from process.argv, each with its default. One reader, so every script spells
// its options the same way and a missing value falls back the same way.

const argv = process.argv.slice(2);

/** The value after `--name`, or `fallback` when the option is absent. */
export function stringOption(name: string, fallback: string): string;
export function stringOption(name: string): string | undefined;
export function stringOption(name: string, fallback?: string): string | undefined {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
}

/** The number after `--name`, or `fallback` when the option is absent. */
export function numberOption(name: string, fallback: number): number {
  const value = stringOption(name);
  return value === undefined ? fallback : Number(value);
}

/** True when the bare flag `--name` is present. */
export function flag(name: string): boolean {
  return argv.includes(`--${name}`);
}
