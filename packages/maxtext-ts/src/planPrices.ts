/**
 * Cloud TPU list prices per chip-hour (USD, us-central regions) as data, with their source and
 * date. The planner multiplies them by chips and modelled hours; pass your own table to `plan`
 * (`pricing`) when your contract differs. Verify against the source before budgeting: Google
 * changes these and they vary by region.
 */

export type PriceTier = 'onDemand' | 'spot' | 'committed1y' | 'committed3y';

export interface PriceRow {
  /** USD per chip-hour for each tier (a tier missing: not offered / unknown). */
  readonly perChipHour: Readonly<Partial<Record<PriceTier, number>>>;
}

export interface PriceTable {
  readonly source: string;
  /** When the numbers were taken (ISO date). */
  readonly date: string;
  readonly note: string;
  readonly generations: Readonly<Record<string, PriceRow>>;
}

export const PRICE_TIERS: readonly PriceTier[] = ['onDemand', 'spot', 'committed1y', 'committed3y'];

export const DEFAULT_PRICES: PriceTable = Object.freeze({
  source: 'https://cloud.google.com/tpu/pricing (list prices per chip-hour, us-central; the articles quoted in tpukit issue 17 give v5e about $1.20-2.20 and v5p about $4.20-8)',
  date: '2026-11-25',
  note: 'on-demand and 1-/3-year committed-use prices as listed on the Cloud TPU pricing page; spot prices float by region and day: the spot column is an estimate (half of on-demand), not a quote; v4 has no spot column',
  generations: Object.freeze({
    v4: { perChipHour: { onDemand: 3.22, committed1y: 2.03, committed3y: 1.45 } },
    v5e: { perChipHour: { onDemand: 1.2, spot: 0.6, committed1y: 0.84, committed3y: 0.54 } },
    v5p: { perChipHour: { onDemand: 4.2, spot: 2.1, committed1y: 2.94, committed3y: 1.89 } },
    v6e: { perChipHour: { onDemand: 2.7, spot: 1.35, committed1y: 1.89, committed3y: 1.22 } },
  }),
});
