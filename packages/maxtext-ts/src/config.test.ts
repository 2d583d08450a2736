import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseConfig, parseOverrides, SHIPPED_CONFIGS } from './config';

describe('config', () => {
  it('loads every shipped config over base.yml with derived keys', () => {
    for (const name of SHIPPED_CONFIGS) expect(loadConfig(name).source).toContain(`${name}.yml`);
    const c = loadConfig('tiny');
    expect(c.emb_dim).toBe(64);
    expect(c.num_kv_heads).toBe(2);
    expect(c.adam_b1).toBe(0.9); // from base.yml
    expect(c.global_batch_size_to_train_on).toBe(8);
    expect(loadConfig('llama2-7b').mlp_dim).toBe(11008);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('applies key=value overrides as YAML scalars and lists', () => {
    const c = loadConfig('tiny', ['steps=7', 'learning_rate=1e-3', 'scan_layers=false', 'mlp_activations=[gelu]', 'run_name=']);
    expect([c.steps, c.learning_rate, c.scan_layers, c.mlp_activations, c.run_name]).toEqual([7, 1e-3, false, ['gelu'], '']);
    expect(parseOverrides(['a=b=c'])).toEqual({ a: 'b=c' });
  });

  it('names the key, the value and what is allowed', () => {
    expect(() => loadConfig('tiny', ['stepz=3'])).toThrow(/unknown key "stepz"; did you mean steps/);
    expect(() => loadConfig('tiny', ['remat_policy=foo'])).toThrow('config overrides: remat_policy = "foo" is not allowed: expected one of full, minimal, none');
    expect(() => loadConfig('tiny', ['steps=0'])).toThrow('steps = 0 is not allowed: expected an integer >= 1');
    expect(() => loadConfig('tiny', ['steps=two'])).toThrow('steps = "two" is not allowed');
    expect(() => loadConfig('tiny', ['adam_b2=1'])).toThrow('adam_b2 = 1 is not allowed: expected a number in [0, 1)');
    expect(() => loadConfig('tiny', ['mlp_activations=[tanh]'])).toThrow('mlp_activations = ["tanh"] is not allowed');
    expect(() => loadConfig('tiny', ['nokey'])).toThrow('expected key=value');
    expect(() => loadConfig('tiny', ['base_num_kv_heads=3'])).toThrow('base_num_query_heads (4) must be a multiple of base_num_kv_heads (3)');
    expect(() => loadConfig('no-such-config')).toThrow(/neither a shipped config \(base, tiny, small, llama2-7b, gpt3-6b\) nor an existing file/);
    expect(() => loadConfig('tiny', ['x=1'])).toThrow(ConfigError);
  });

  it('checks the ici_* product against the device count', () => {
    expect(loadConfig('tiny', ['ici_fsdp_parallelism=1']).num_devices).toBe(1);
    expect(() => loadConfig('tiny', ['ici_data_parallelism=2'])).toThrow(/ici_data_parallelism=2, ici_fsdp_parallelism=-1, ici_tensor_parallelism=1 must equal the device count \(1/);
    expect(() => loadConfig('tiny', ['ici_data_parallelism=-1'])).toThrow('at most one ici_*_parallelism may be -1');
  });

  it('reads a YAML file, naming it in errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'maxtext-cfg-'));
    const f = join(dir, 'mine.yml');
    writeFileSync(f, 'steps: 3\nvocab_size: 300\nbogus: 1\n');
    expect(() => loadConfig(f)).toThrow(`config ${f}: unknown key "bogus"`);
    writeFileSync(f, 'steps: 3\nvocab_size: 300\n');
    expect(loadConfig(f).vocab_size).toBe(300);
    expect(() => parseConfig('- a\n- b\n', [], 'list.yml')).toThrow('config list.yml: the top level must be a mapping');
    expect(() => parseConfig('a: [\n', [], 'bad.yml')).toThrow('config bad.yml: not valid YAML');
  });
});
