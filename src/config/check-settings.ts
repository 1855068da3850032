import { SETTING_GROUPS, type Settings } from './settings/setting-groups';
import type { Declarations, ProductionRule, SettingGroup, SpanningRule } from './settings/setting';

/** The groups whose rules these steps check; the others' steps check theirs as they read them. */
const CHECKED_HERE = (SETTING_GROUPS as readonly SettingGroup<Declarations, unknown>[]).filter(
  (group) => !group.checkedByItsOwnStep,
);

/**
 * What production's rules make of a value: a variable's (`setting.production`) or one entry of its list
 * (`setting.productionOfEach`, `name` then naming the entry too).
 */
export function problemsOf<V>(
  rules: readonly ProductionRule<V>[] | undefined,
  name: string,
  value: V,
): string[] {
  return (rules ?? []).flatMap((rule) => rule.problems(name, value));
}

/** A group's rules over several variables that hold in this environment, in their order. */
export function spanningRulesOf<I>(
  group: { readonly rules?: readonly SpanningRule<I>[] },
  production: boolean,
): SpanningRule<I>[] {
  return (group.rules ?? []).filter((rule) => rule.when === 'always' || production);
}

/** A group's rules over several variables that hold `when`, over every setting's value. */
const rulesHolding = (group: SettingGroup<Declarations, unknown>, when: SpanningRule<unknown>['when']) =>
  (group.rules ?? []).filter((rule) => rule.when === when) as SpanningRule<Settings>[];

/**
 * Production's rules, group by group: each variable's own, in the order they are declared, then the
 * rules over several of the group's variables.
 */
export function productionProblems(settings: Settings): string[] {
  const values = settings as Readonly<Record<string, unknown>>;
  return CHECKED_HERE.flatMap((group) => [
    ...Object.entries(group.settings as Declarations).flatMap(([name, setting]) =>
      problemsOf(setting.production as readonly ProductionRule<unknown>[] | undefined, name, values[name]),
    ),
    ...rulesHolding(group, 'production').flatMap((rule) => rule.problems(settings)),
  ]);
}

/** The rules over several variables that hold in every environment, group by group. */
export function consistencyProblems(settings: Settings): string[] {
  return CHECKED_HERE.flatMap((group) =>
    rulesHolding(group, 'always').flatMap((rule) => rule.problems(settings)),
  );
}
