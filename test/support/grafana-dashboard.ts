import { readFileSync } from 'node:fs';
import { projectPath } from './project-paths';

/** The dashboard as committed: ops/grafana/account-connection-service.json, Grafana's JSON model. */
export const DASHBOARD_FILE = projectPath('ops', 'grafana', 'account-connection-service.json');

export interface DatasourceRef {
  type?: string;
  uid?: string;
}

export interface Panel {
  id: number;
  type: string;
  title: string;
  gridPos: { h: number; w: number; x: number; y: number };
  datasource?: DatasourceRef;
  targets?: { refId: string; expr?: string; datasource?: DatasourceRef }[];
  links?: { title: string; url: string }[];
  /** A collapsed row keeps its panels here. */
  panels?: Panel[];
}

export interface Variable {
  name: string;
  type: string;
  query?: string | { query: string };
  allValue?: string;
  current?: { value?: string | string[] };
  datasource?: DatasourceRef;
}

export interface Dashboard {
  __inputs?: unknown;
  title: string;
  schemaVersion: number;
  panels: Panel[];
  links: { title: string; url: string }[];
  templating: { list: Variable[] };
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

/** Every panel, rows included, and the panels a collapsed row holds. */
export function allPanels(dashboard: Dashboard): Panel[] {
  return dashboard.panels.flatMap((panel) => [panel, ...(panel.panels ?? [])]);
}

/** The panels that show something: every one but the rows. */
export function shownPanels(dashboard: Dashboard): Panel[] {
  return allPanels(dashboard).filter((panel) => panel.type !== 'row');
}

export interface DashboardQuery {
  panel: string;
  refId: string;
  expr: string;
}

export function queriesOf(dashboard: Dashboard): DashboardQuery[] {
  return shownPanels(dashboard).flatMap((panel) =>
    (panel.targets ?? []).map((target) => ({
      panel: panel.title,
      refId: target.refId,
      expr: target.expr ?? '',
    })),
  );
}

/** A query variable's query text: `label_values(selector, label)`. */
export function variableQuery(variable: Variable): string {
  return typeof variable.query === 'string' ? variable.query : (variable.query?.query ?? '');
}

/** Every datasource reference anywhere in the model (panels, targets, variables), with where it is. */
export function datasourceRefs(value: unknown, where = '$'): { where: string; ref: DatasourceRef }[] {
  if (Array.isArray(value)) return value.flatMap((item, index) => datasourceRefs(item, `${where}[${index}]`));
  if (typeof value !== 'object' || value === null) return [];
  return Object.entries(value).flatMap(([key, child]) =>
    key === 'datasource' && typeof child === 'object' && child !== null
      ? [{ where: `${where}.datasource`, ref: child as DatasourceRef }]
      : datasourceRefs(child, `${where}.${key}`),
  );
}

/**
 * A query as Grafana sends it: `$name` and `${name}` replaced by `values`, Grafana's own `$__…` included.
 * A variable without a value stays, `$` and all, for the caller to report.
 */
export function interpolate(expr: string, values: Record<string, string>): string {
  return expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced?: string, bare?: string) => {
    const name = (braced ?? bare) as string;
    return values[name] ?? whole;
  });
}

/** The variables a text names, `$name` or `${name}`. */
export function variablesIn(text: string): string[] {
  return [...text.matchAll(/\$\{(\w+)\}|\$(\w+)/g)].map((match) => (match[1] ?? match[2]) as string);
}
