/** One scrape in Prometheus's text format, read back as samples. */
export interface Scrape {
  /** The value of the one sample of `name` with exactly these labels; undefined when there is none. */
  value(name: string, labels?: Record<string, string>): number | undefined;
  /** Every sample of `name`, with its labels. */
  samples(name: string): { labels: Record<string, string>; value: number }[];
  /** The metric families the scrape declares (its `# TYPE` lines). */
  families(): string[];
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

export function parseScrape(text: string): Scrape {
  const samples: { name: string; labels: Record<string, string>; value: number }[] = [];
  const families: string[] = [];
  for (const line of text.split('\n')) {
    if (line.startsWith('# TYPE ')) families.push(line.split(' ')[2] as string);
    if (line.startsWith('#') || line.trim() === '') continue;
    const match = SAMPLE.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? '').matchAll(LABEL)) labels[label[1] as string] = label[2] as string;
    samples.push({ name: match[1] as string, labels, value: Number(match[3]) });
  }
  const sameLabels = (a: Record<string, string>, b: Record<string, string>) =>
    Object.keys(a).length === Object.keys(b).length &&
    Object.entries(b).every(([key, value]) => a[key] === value);
  return {
    value: (name, labels = {}) =>
      samples.find((sample) => sample.name === name && sameLabels(sample.labels, labels))?.value,
    samples: (name) => samples.filter((sample) => sample.name === name),
    families: () => families,
  };
}
