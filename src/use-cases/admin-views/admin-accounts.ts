import {
  adminAccountList,
  type AccountFilters,
  type AdminAccountRow,
} from '../../repository/accounts-repository';
import { AdminList, type AdminListParts } from './admin-list';

export type { AccountFilters };

/** An account as operators get it: the row without its internal id (its time is ISO text already). */
export type AdminAccount = Omit<AdminAccountRow, 'id'>;

export function toAdminAccount(row: AdminAccountRow): AdminAccount {
  return {
    provider_account_id: row.provider_account_id,
    item_id: row.item_id,
    subscription_user_id: row.subscription_user_id,
    app_name: row.app_name,
    institution_id: row.institution_id,
    institution_name: row.institution_name,
    name: row.name,
    mask: row.mask,
    type: row.type,
    subtype: row.subtype,
    status: row.status,
    created_at: row.created_at,
    provider: row.provider,
  };
}

/** Operators' view of who is connected to what: pages of accounts, and exports of all of them. */
export class AdminAccounts extends AdminList<AccountFilters, AdminAccountRow, AdminAccount> {
  constructor(parts: AdminListParts) {
    super(parts, { what: 'account', rows: adminAccountList, toItem: toAdminAccount });
  }
}
