// A workerCount far above the core count warns once per process (threads beyond the cores cost
// memory and messaging without speed); up to twice the cores it stays quiet.
import { availableParallelism } from 'node:os';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { DataLoader, IndexSampler, MapDataset } from '../src/index';

const worker = { module: '/nonexistent/pipeline.mjs' }; // never loaded: workers start on the first next()

describe('workerCount above the core count', () => {
  afterEach(() => vi.restoreAllMocks());

  it('warns once per process, naming the count and the cores', () => {
    const emit = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    const cores = availableParallelism();
    MapDataset.range(8).toIterDataset({ workerCount: 2 * cores, worker });
    expect(emit).not.toHaveBeenCalled();
    MapDataset.range(8).toIterDataset({ workerCount: 2 * cores + 1, worker });
    expect(emit).toHaveBeenCalledTimes(1);
    expect(String(emit.mock.calls[0][0])).toMatch(new RegExp(`^toIterDataset: workerCount ${2 * cores + 1} is more than twice the ${cores} cores`));
    expect(emit.mock.calls[0][1]).toEqual({ code: 'TPUKIT_GRAIN_WORKERS' });
    MapDataset.range(8).toIterDataset({ workerCount: 64 * cores, worker });
    new DataLoader({ source: { length: 4, get: (i: number) => i }, sampler: new IndexSampler({ numRecords: 4 }), workerCount: 64 * cores, worker });
    expect(emit).toHaveBeenCalledTimes(1);
  });
});
