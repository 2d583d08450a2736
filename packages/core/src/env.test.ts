import { afterEach, describe, expect, it } from 'vitest';
import { envNumber, envSwitch } from './env';

const NAME = 'TPUKIT_TEST_ENV_HELPER';

describe('environment switches', () => {
  afterEach(() => {
    delete process.env[NAME];
  });

  it('envSwitch: 1 on, 0 off, unset or empty the default, anything else an error naming the variable and value', () => {
    expect(envSwitch(NAME, true)).toBe(true);
    process.env[NAME] = '';
    expect(envSwitch(NAME, false)).toBe(false);
    process.env[NAME] = '1';
    expect(envSwitch(NAME, false)).toBe(true);
    process.env[NAME] = '0';
    expect(envSwitch(NAME, true)).toBe(false);
    process.env[NAME] = 'off';
    expect(() => envSwitch(NAME, true)).toThrow(`${NAME} must be 0 or 1; got "off"`);
  });

  it('envNumber: unset gives undefined; integers or numbers within the range; others an error naming the variable and value', () => {
    expect(envNumber(NAME, 0, 10)).toBeUndefined();
    process.env[NAME] = '7';
    expect(envNumber(NAME, 0, 10)).toBe(7);
    process.env[NAME] = '2.5';
    expect(envNumber(NAME, 0, 10, false)).toBe(2.5);
    expect(() => envNumber(NAME, 0, 10)).toThrow(`${NAME} must be an integer in 0..10; got "2.5"`);
    process.env[NAME] = 'lots';
    expect(() => envNumber(NAME, 0, 10, false)).toThrow(`${NAME} must be a number in 0..10; got "lots"`);
    process.env[NAME] = '11';
    expect(() => envNumber(NAME, 0, 10)).toThrow(/got "11"/);
  });
});
